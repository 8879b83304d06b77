"""The MCP edge: advertised schemas and tool adapters (``tools``, ``typed``), the server
(``server``: tools, the knowledge-graph resource, change notifications) and its two transports
(``stdio``, ``http``).

Adapters parse arguments into typed models, call one :class:`~graph_memory.service.MemoryService`
method and build the wire result; ``server`` holds the one ``GraphError → MCP`` mapping. Nothing
here imports the storage layer's SQL.

Modules here import the SDK absolutely (``import mcp``, ``from mcp.server import …``): with
absolute imports this package, ``graph_memory.mcp``, never shadows the SDK's top-level ``mcp``.
"""
