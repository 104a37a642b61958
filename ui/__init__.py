"""Small render helpers shared by the pages: they take domain rows and draw, no module state."""
