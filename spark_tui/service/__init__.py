"""The service layer: one Textual-free object per cockpit or CLI run (`Session`) that owns
the connection pool and the cluster, with each user action as one async generator of typed
events (`service.events`); the CLI and the cockpit only render them."""
