"""Labelling tutoring dialogues through any OpenAI-compatible endpoint, in the released annotation layout."""
