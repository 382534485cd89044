"""`aotx chat`: a terminal client. Plain (a streaming chat with history through /v1/responses and
`previous_response_id`: ops.chat.plain) or joined to a shared conversation (ops.chat.shared)."""
