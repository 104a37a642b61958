"""The lab itself, in layers (engine < measure < compare < experiment < decide < present < cli,
settings.py read by all); never imports Streamlit."""
