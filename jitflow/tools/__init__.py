"""Command-line helpers: `check` (run a TF1 script on jitflow) and the API coverage list."""
