# placeholder: the smoke test script (issue 5)
