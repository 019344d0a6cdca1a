"""Domain models: Pool, Node, MoveRequest, Approval and AuditEvent arrive with their issues."""
