package live

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestActiveRows(t *testing.T) {
	cols := []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "STATE"}, {Name: "ESTABLISHED"}, {Name: "AGE"}}
	cases := map[string]struct {
		reason  string
		table   metav1.Table
		want    []string
		wantErr bool
	}{
		"ActiveOnly": {
			reason: "Only rows whose State cell is Active are named; Inactive and unset are not.",
			table: metav1.Table{ColumnDefinitions: cols, Rows: []metav1.TableRow{
				{Cells: []any{"vpcs.ec2.aws.upbound.io", "Active", "True", "1m"}},
				{Cells: []any{"subnets.ec2.aws.upbound.io", "Inactive", "False", "1m"}},
				{Cells: []any{"flowlogs.ec2.aws.upbound.io", nil, nil, "1m"}},
			}},
			want: []string{"vpcs.ec2.aws.upbound.io"},
		},
		"ShortRow": {
			reason: "A row without a State cell is skipped.",
			table:  metav1.Table{ColumnDefinitions: cols, Rows: []metav1.TableRow{{Cells: []any{"vpcs.ec2.aws.upbound.io"}}}},
		},
		"NoStateColumn": {
			reason:  "A table without a State column (another CRD version) is an error, not an empty answer.",
			table:   metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{{Name: "Name"}}},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := activeRows(&tc.table)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nactiveRows: error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nactiveRows (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
