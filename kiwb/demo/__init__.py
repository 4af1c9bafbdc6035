"""`kiwb demo`: a shipped corpus and the recipe that builds a whole project from it offline."""
