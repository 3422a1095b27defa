"""Layer: metadata."""
