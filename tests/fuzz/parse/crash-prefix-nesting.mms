test a
proc P
when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT when cow.policy=rfc expect-error EFAULT P exit
