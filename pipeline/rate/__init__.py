"""How often an application hallucinates: the audit sample people judge, and the rate estimated from it."""
