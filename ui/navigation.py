"""The app's pages as the sidebar lists them: each page's file, its label and its URL path, set
here rather than taken from a file name (app.py builds Streamlit's navigation from this table, so
the entry can be app.py while the sidebar's first entry still reads "Home")."""

from __future__ import annotations

from dataclasses import dataclass

PAGES_DIR = "app_pages"  # not `pages/`: beside it Streamlit runs its legacy pages-folder mode


@dataclass(frozen=True)
class AppPage:
    """One screen: its file (relative to app.py), its sidebar label and its URL path ("" is the
    app's root, the default page)."""

    file: str
    label: str
    url_path: str

    @property
    def default(self) -> bool:
        return self.url_path == ""


# In the sidebar's order; the labels and URL paths are the ones the pages had when Streamlit named
# them from their files (`app_pages/3_Live.py` -> "Live" at /Live), so bookmarks keep working.
PAGES: tuple[AppPage, ...] = (
    AppPage(f"{PAGES_DIR}/0_Home.py", "Home", ""),
    AppPage(f"{PAGES_DIR}/1_New_experiment.py", "New experiment", "New_experiment"),
    AppPage(f"{PAGES_DIR}/2_Runs.py", "Runs", "Runs"),
    AppPage(f"{PAGES_DIR}/3_Live.py", "Live", "Live"),
    AppPage(f"{PAGES_DIR}/4_Compare.py", "Compare", "Compare"),
    AppPage(f"{PAGES_DIR}/5_History.py", "History", "History"),
    AppPage(f"{PAGES_DIR}/6_Settings.py", "Settings", "Settings"),
    AppPage(f"{PAGES_DIR}/7_Searches.py", "Searches", "Searches"),
)
