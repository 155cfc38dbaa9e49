"""The only code that knows boto: clients, the one door for requests, S3, stats, spans."""
