"""The dashboard (`warehouse serve`): a read-only web app over the metric views."""
