# A multiprocessing Pool with the fork start method over a large dict: the
# workers only read it, and the reads write the objects' reference counts,
# so every page of the parent's heap they touch is copied.
import multiprocessing as mp

table = {i: str(i) * 4 for i in range(1_000_000)}

def work(k):
    s = 0
    for i in range(k, len(table), 7):
        s += len(table[i])
    return s

if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Pool(2) as pool:
        print(sum(pool.map(work, range(7))))
