"""The REST API (/api/v1/): the same services and selectors as the pages, the same roles."""
