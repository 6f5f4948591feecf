tune gup.walk fancy
