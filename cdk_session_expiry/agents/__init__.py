"""Amazon Bedrock AgentCore: the AgentCore resources the cleanup may end (`agentcore`) and the
AgentCore Memory resources (`agent_memory`). The construct and its session-access unit import
it; it imports the top-level helpers only.
"""
