test a
expect violation
