"""Small pieces every layer may use; they import nothing of Gantt."""
