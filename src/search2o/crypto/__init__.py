"""Envelope encryption of conversation content: AES-256-GCM records, wrapped data keys, KEKs."""
