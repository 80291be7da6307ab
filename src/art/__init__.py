"""ART: the Agent Reinforcement Trainer."""
