"""The folders electra_tf writes and reads, one type per kind (the one owner of their
format, below training/, serving/ and interop/):

- `PretrainingFolder` (pretraining.py): a pre-training model_dir;
- `FinetunedFolder` (finetuned.py): a fine-tuned model_dir;
- `ConvertedFolder` (converted.py): what a conversion writes, read as either;
- files.py: the file names, versioned JSON and weights they share;
  vocabulary.py: the vocab.txt each carries, checked by its fingerprint;
- (either kind) .lock: while a run runs, its host and pid (core/fileio.FolderLock:
  one run per folder; the lock dies with its process, the file goes when the run ends).

The TF Serving export is `export/`'s own layout (TF Serving's).
"""

from electra_tf.folders.converted import ConvertedFolder
from electra_tf.folders.finetuned import FinetunedFolder, FinetunedRecord
from electra_tf.folders.pretraining import PretrainingFolder

__all__ = ["ConvertedFolder", "FinetunedFolder", "FinetunedRecord", "PretrainingFolder"]
