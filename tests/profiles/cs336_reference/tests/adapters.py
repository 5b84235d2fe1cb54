"""The reference (``reference/``) behind Stanford CS336 assignment 1's adapter functions.

Graded with ``pytest --profile cs336 --impl tests/profiles/cs336_reference`` (``tests/test_profiles.py``); it
must score 100 on the profile's applicable tests. The functions are ``transformer_spec/profiles/cs336_adapters.py``'s.
"""

import reference
from transformer_spec.profiles.cs336_adapters import adapters_for

globals().update(adapters_for(reference))
