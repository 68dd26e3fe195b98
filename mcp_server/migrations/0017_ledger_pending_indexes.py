# The ledger's (state, created) and (worker, state) indexes become partial, over pending rows only: every
# query that used them asks for pending rows (the live page, the upkeep's leases and strays, the metrics),
# and most rows are written already settled (behind the request path), so they no longer enter them.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_server", "0016_ledger_round_of_unindexed"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="ledgerentry", name="mcp_ledger_state_created"),
        migrations.RemoveIndex(model_name="ledgerentry", name="mcp_ledger_worker_state"),
        migrations.AddIndex(
            model_name="ledgerentry",
            index=models.Index(
                condition=models.Q(("state", "pending")), fields=["created"], name="mcp_ledger_pending"
            ),
        ),
        migrations.AddIndex(
            model_name="ledgerentry",
            index=models.Index(
                condition=models.Q(("state", "pending")),
                fields=["worker", "created"],
                name="mcp_ledger_pending_worker",
            ),
        ),
    ]
