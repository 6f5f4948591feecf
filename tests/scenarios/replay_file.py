"""The command line every one-file selftest replay generator shares
(gen_*.py beside this file): `--out DIR` names the folder the .mms file
is written into, this folder by default."""
import argparse
import os


def main(doc, name, gen):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help=f"directory to write {name} into (default: the generators' own)")
    args = ap.parse_args()
    with open(os.path.join(args.out, name), "w") as f:
        f.write(gen())
