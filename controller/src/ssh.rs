//! Workers reached over SSH: connection, agentless deployment, and the channel to `serve`.
