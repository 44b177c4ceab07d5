"""The emulator's service models, where moto lacks a service or needs a patch: AgentCore Memory
(`_moto_agentcore_memory`), AppConfig (`_moto_appconfig`, `_cloudformation_appconfig`), Firehose
(`_moto_firehose`), DynamoDB transactions (`_moto_transactions`), CloudFormation resources
(`_cloudformation_models`), the declared kinds' release calls (`_moto_resource_kinds`) and the
patches of moto's internals (`_moto_internals`). The emulator
(`cdk_session_expiry.testing.emulator`) imports it; it imports nothing of the testing package.
"""
