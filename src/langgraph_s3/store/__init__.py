"""The long-term memory store (LangGraph's BaseStore): façade, format, items, search, TTL."""
