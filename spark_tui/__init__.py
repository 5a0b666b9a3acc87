"""spark-tui: run one vLLM service across several DGX Sparks from a terminal cockpit."""

import warnings

__version__ = "0.1.0"

# asyncssh still names cryptography's DSA types at import, which cryptography 51 and newer
# warns of on every command; the user can do nothing about it (spark-tui never offers DSA
# keys), so it is kept off their terminal.
warnings.filterwarnings("ignore", message=r"DSA is deprecated", module=r"asyncssh(\.|$)")
