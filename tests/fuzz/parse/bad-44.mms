test a
unpin H
