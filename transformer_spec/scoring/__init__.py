"""What a test scores: the rubric (points per component and test, dropped and hidden tests,
forbidden APIs), read from TOML and checked against the registry (:mod:`.rubric`).

May use: the guard (the forbidden APIs it lists), the contract. Used by the pytest plugin, the
catalogue's placeholder rows and the class grader.
"""
