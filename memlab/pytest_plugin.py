"""pytest plugin (registered as the ``pytest11`` entry point ``memlab``): plain ``assert``s in
``memlab.testing`` report their values, so a failing conformance check shows what the backend did.

It lives outside ``memlab.testing`` because pytest must mark that package for rewriting before
anything imports it.
"""

import pytest

pytest.register_assert_rewrite("memlab.testing")
