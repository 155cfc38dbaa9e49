"""What an operator runs: the command line, doctor, the viewer and the demo."""
