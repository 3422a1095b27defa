"""Layer: commit."""
