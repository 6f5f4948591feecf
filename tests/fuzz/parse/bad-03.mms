tune cow.policy rfc2
