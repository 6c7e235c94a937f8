"""Framework integrations, one module per framework, each behind its own extra.

- `ctxwatch.integrations.langchain`: LangChain v1 agent middleware (``pip install 'ctxwatch[langchain]'``).
- `ctxwatch.integrations.langchain_instrumentor`: the OpenTelemetry instrumentor that adds it to
  every ``create_agent`` (entry point ``opentelemetry_instrumentor``).
- `ctxwatch.integrations.openai_agents`: a guarded session for the OpenAI Agents SDK
  (``ctxwatch[openai-agents]``).
- `ctxwatch.integrations.anthropic`: Anthropic server-side context editing and compaction recorded
  as mutations (``ctxwatch[anthropic]``).

Nothing here is imported by ``import ctxwatch``; each module imports its framework itself.
"""
