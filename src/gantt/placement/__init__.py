"""The Placement domain on Gantt's one model: allocation candidates over provider trees, the façade the Placement
face calls (``facade``), and the face itself, OpenStack Placement's REST API (``api``)."""
