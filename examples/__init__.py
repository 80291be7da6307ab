"""Example tasks: each folder holds an environment, a rollout and a train script."""
