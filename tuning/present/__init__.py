"""What the lab shows: charts, the HTML reports, exports of charts and tables."""
