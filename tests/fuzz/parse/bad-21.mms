test a
expect-error ENOTANERRNO P exit
