"""The ports vLLM and Ray listen on when a recipe does not say otherwise.

A module of its own so that what only needs a port (the session's cluster, attaching) does
not load the launch plan with it.
"""

DEFAULT_API_PORT = 8000
DEFAULT_MASTER_PORT = 29501
DEFAULT_DP_RPC_PORT = 13345
DEFAULT_RAY_PORT = 46379
DEFAULT_DASHBOARD_PORT = 8265
