"""The checkpoint saver: façade, reading, writing, history, packs, maintenance, transfer."""
