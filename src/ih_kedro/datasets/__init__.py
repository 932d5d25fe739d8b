"""Custom Kedro datasets. Referenced in the catalog by full module path, e.g.
``ih_kedro.datasets.pile_shards.PileShardsDataset``."""
