"""The main screen's flows that its first frame does not need (launch and follow, stop,
smoke and bench, tuning, sweeps, the history, the log views), each a module of functions
that take the screen, loaded when its key is first pressed: compiled at every start of a
fresh checkout, they cost the first frame a tenth of a minimal Textual app's start."""
