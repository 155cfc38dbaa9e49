"""The example's agent, for ``langgraph-s3 lambda build agent.py:graph``: the demo's chat
(an agent node with a scripted model, and a weather tool), as a builder the generated
handler compiles with the saver."""

from langgraph_s3.testing.graphs import chat_graph

graph = chat_graph()
