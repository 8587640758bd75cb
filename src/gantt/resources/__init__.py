"""The resource-provider model: provider trees, inventories, resource classes and traits."""
