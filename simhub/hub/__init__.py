"""Publishing trained adapters to the Hugging Face Hub with their model cards, and pulling them back."""

from simhub.hub.publish import card_data, publish, pull, read_runs, render_card, stage_upload

__all__ = ["card_data", "publish", "pull", "read_runs", "render_card", "stage_upload"]
