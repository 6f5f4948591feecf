test 9abc
