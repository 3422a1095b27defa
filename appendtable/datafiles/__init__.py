"""Layer: datafiles."""
